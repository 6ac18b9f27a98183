"""The offline side of docsim: reading corpora, splitting, encoding and the stored index state."""
