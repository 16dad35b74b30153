"""Redis data driver: every multi-step change is one Lua script."""
