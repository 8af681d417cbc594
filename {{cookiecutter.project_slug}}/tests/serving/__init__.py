"""Tests of the production serving stack (deploy/, Dockerfile, compose.yaml)."""
