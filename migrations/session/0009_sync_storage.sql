-- sync.storage: which storage the upload state describes (the persistence provider, bucket,
-- endpoint, directory and prefix, as JSON). After the deployment's storage changed, nothing this
-- session uploaded is there, so its upload state starts over. NULL until first compared: a row
-- written before this column takes the storage configured when it is first read.
ALTER TABLE sync ADD COLUMN storage TEXT;
