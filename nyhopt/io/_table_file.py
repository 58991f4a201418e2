"""The text of a table file: plain, or compressed by the name's extension; a binary file named.

Compression follows the name as pandas does (``.gz``, ``.bz2``, ``.xz``,
``.zip``; a ``.zip`` must hold exactly one file), read with the standard
library.  The text is UTF-8 (a byte-order mark is dropped).  A file that is
not text is named by its first bytes (an Excel workbook, a Parquet file, a
compressed file under another name, ...), so that the message says what to do.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import zipfile
import zlib

from ..errors import DataError

__all__ = ["COMPRESSIONS", "read_text", "describe_binary"]

COMPRESSIONS = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zip": "zip"}
_MAGIC = {"gzip": (b"\x1f\x8b",), "bzip2": (b"BZh",), "xz": (b"\xfd7zXZ\x00",), "zip": (b"PK\x03\x04", b"PK\x05\x06")}

# (leading bytes, what the file seems to be); the first match wins
_SIGNATURES = (
    (b"\x1f\x8b", "a gzip-compressed file (name it with .gz to read it)"),
    (b"BZh", "a bzip2-compressed file (name it with .bz2 to read it)"),
    (b"\xfd7zXZ\x00", "an xz-compressed file (name it with .xz to read it)"),
    (b"(\xb5/\xfd", "a zstandard-compressed file (decompress it first: zstd -d)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive (extract the table first)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office file such as an Excel .xls workbook (save the sheet as CSV)"),
    (b"PAR1", "a Parquet file (write it as CSV, e.g. pandas.read_parquet(...).to_csv(...))"),
    (b"ARROW1", "an Arrow/Feather file (write it as CSV)"),
    (b"\x89HDF", "an HDF5 file (write the table as CSV)"),
    (b"SQLite format 3\x00", "an SQLite database (export the table as CSV)"),
    (b"\x93NUMPY", "a NumPy .npy array (write it as CSV, e.g. numpy.savetxt)"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x7fELF", "an executable (ELF)"),
)


def _zip_kind(raw: bytes) -> str:
    import io

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        names = []
    if any(n.startswith("xl/") for n in names):
        return "an Excel .xlsx workbook (save the sheet as CSV)"
    if any(n.endswith(".npy") for n in names):
        return "a NumPy .npz archive (an nyhopt model file is read by 'nyhopt predict', not as a table)"
    if any(n.startswith("word/") or n.startswith("ppt/") for n in names):
        return "an Office document"
    return "a zip archive (name it with .zip to read the table in it)"


def describe_binary(raw: bytes) -> str:
    """What the bytes of a file that is not UTF-8 text seem to be, as a phrase.

    Examples
    --------
    >>> describe_binary(b"PAR1....")
    'a Parquet file (write it as CSV, e.g. pandas.read_parquet(...).to_csv(...))'
    >>> describe_binary("prix;température\\n".encode("latin-1"))
    'text, but not UTF-8 (perhaps Latin-1 or Windows-1252: save it as UTF-8)'
    """
    if raw[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return _zip_kind(raw)
    for magic, what in _SIGNATURES:
        if raw.startswith(magic):
            return what
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "UTF-16 text (save it as UTF-8)"
    sample = raw[:65536]
    if b"\x00" in sample:
        return "binary data, not a text table"
    return "text, but not UTF-8 (perhaps Latin-1 or Windows-1252: save it as UTF-8)"


def _zip_member(path):
    with zipfile.ZipFile(path) as zf:
        members = [i for i in zf.infolist() if not i.is_dir() and not i.filename.startswith("__MACOSX/")]
        if len(members) != 1:
            listed = ", ".join(i.filename for i in members[:5]) + (", ..." if len(members) > 5 else "")
            raise DataError(f"{path}: a .zip table must hold exactly one file, this one holds "
                            f"{len(members)}{': ' + listed if members else ''}")
        return zf.read(members[0])


def _read_bytes(path, kind):
    if kind is None:
        with open(path, "rb") as f:
            return f.read()
    if kind == "zip":
        return _zip_member(path)
    opener = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}[kind]
    with opener(path, "rb") as f:
        return f.read()


def _extension(path):
    lower = path.lower()
    return next((ext for ext in COMPRESSIONS if lower.endswith(ext)), None)


def read_text(path: str) -> str:
    """The text of the table file ``path`` (decompressed by its extension), newlines kept.

    Raises
    ------
    DataError
        A compressed file that is damaged or not of its extension's kind, a
        ``.zip`` without exactly one file, or content that is not UTF-8 text
        (the message says what it seems to be).
    """
    ext = _extension(path)
    kind = COMPRESSIONS.get(ext)
    try:
        raw = _read_bytes(path, kind)
    except DataError:
        raise
    except (OSError, EOFError, lzma.LZMAError, zlib.error, zipfile.BadZipFile) as exc:
        with open(path, "rb") as f:
            head = f.read(65536)
        if head.startswith(_MAGIC[kind]):
            raise DataError(f"{path} is a damaged {kind} file ({type(exc).__name__}: {exc})") from None
        seems = describe_binary(head) if head else "empty"
        raise DataError(f"{path} is named {ext} but is not a {kind} file: it seems to be {seems}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        what = "the decompressed content" if kind else "it"
        raise DataError(f"{path} is not a text table: {what} seems to be {describe_binary(raw)} "
                        f"(byte 0x{raw[exc.start]:02x} at position {exc.start} is not UTF-8)") from None
    return text[1:] if text.startswith("\ufeff") else text
