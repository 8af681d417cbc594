"""Fixtures the database tests share with the reliability tests: nginx_bin (nginx, or a skip
saying how to install it) and stacks (live stacks, all stopped after each test)."""

from reliability.conftest import nginx_bin, stacks

__all__ = ["nginx_bin", "stacks"]  # pytest finds fixtures by name in a conftest.py
