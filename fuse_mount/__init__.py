"""fuse_mount"""
