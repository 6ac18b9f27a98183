"""The HTTP edge of docsim (FastAPI); it arrives with the /similar issue."""
