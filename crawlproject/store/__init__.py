"""Page bodies: written to a local spool, uploaded to a body store.

What each module holds, from the pipeline down (pipelines/store.py calls
writers.py, backpressure.py and writer_thread.py only):

* config.py: the settings (BodyStoreConfig: what is written; StoreConfig: where);
* writers.py: the two formats behind one BodyWriter interface;
* warc.py (the rolling WARC writer), warc_read.py (a record read back),
  warc_recovery.py (a killed writer's files), index.py (CDXJ indexes of WARC
  files), hops.py (redirects kept for the WARC file), signals.py;
* objects.py: the object format (one gzip object per distinct body, a CDXJ index);
* rolling.py: the rolling, append-only, locked file both formats write;
* writer_thread.py: which writes run inline and which in the writer thread;
* backpressure.py: pausing the worker while its spool is too full;
* uploader.py: finished files from the spool to the store, in one thread;
* base.py (the BodyStore interface, keys), local.py, s3.py, errors.py
  (transient vs refused), uri.py (CRAWL_STORE_URI), factory.py (open_store).

The body's SHA-1 (its payload digest) comes from crawlproject/body_digest.py.
"""
