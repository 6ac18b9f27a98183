"""The stored state: SQL tables and sessions, index versions and their lifecycle, FAISS files."""
