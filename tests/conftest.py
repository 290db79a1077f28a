"""Shared test configuration. ``pytester`` drives the plugin's own tests (tests/plugin/)."""

pytest_plugins = ["pytester"]
