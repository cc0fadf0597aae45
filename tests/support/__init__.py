"""Test support code (never imported by ssmrepro/)."""
