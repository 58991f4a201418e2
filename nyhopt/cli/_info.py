"""``nyhopt info``: the installation, the devices and the CUDA compiler, as text or JSON."""
from __future__ import annotations

import json


def cmd_info(args) -> int:
    from ._report import format_text, gather

    info = gather(compile_cuda=not args.no_compile)
    print(json.dumps(info, indent=1) if args.json else format_text(info))
    return 0
