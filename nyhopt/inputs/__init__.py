"""The door: checks and conversions of what users pass (arrays, targets, labels, tables).

Every public entry point checks its inputs here once; the layers below take what it returns.
"""
