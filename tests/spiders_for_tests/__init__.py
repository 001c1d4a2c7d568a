"""Spiders used only by the tests."""
