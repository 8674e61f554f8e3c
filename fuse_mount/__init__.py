"""The Host tree on a local FUSE mount (`hostfinder mount`): pyfuse3 operations over store.host.HostTree.

command.py (the command and its lifecycle), operations.py (one Host tree call per request),
inodes.py (path <-> inode), handles.py (open files, one version per save), events.py (live
changes), errors.py (store error -> errno)."""
