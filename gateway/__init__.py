"""The process: configuration, the `hostfinder` command line, the embedded PostgreSQL, and one
cheroot server hosting WebDAV under /dav/ and the API under /api/."""
