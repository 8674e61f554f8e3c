"""The Host tree on a local FUSE mount (`hostfinder mount`): pyfuse3 operations over store.host.HostTree.

command.py (the command and its lifecycle), operations.py (one Host tree call per request, or none
when the content cache or a fresh listing answers), inodes.py (path <-> inode), listings.py (folder
listings kept until a change), handles.py (open files, one version per save), own_writes.py (this
mount's own saves, told apart from changes made elsewhere), events.py (live changes, from
store.changefeed), errors.py (store error -> errno)."""
