-- checkpoints.native_hash: SHA-256 (64 hex) of the checkpoint's uploaded native object, written
-- into its manifest so a restore or load can tell a changed object from the one uploaded. NULL
-- before the upload, and for checkpoints restored from manifests written before this column.
ALTER TABLE checkpoints ADD COLUMN native_hash TEXT;
