"""The WebDAV front end: a WsgiDAV provider that projects the Host tree's display paths as files.
It translates WebDAV to Host tree calls and store errors to DAV statuses; no rule lives here."""

# Where the gateway serves WebDAV: the prefix of every href a client is sent.
MOUNT_PATH = "/dav"
