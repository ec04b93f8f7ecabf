"""The vocabulary every layer uses (ARCHITECTURE.md lists what each module holds)."""
