"""Factories shared by the tests."""
