"""Background work on a published index: the job queue, the worker and document changes."""
