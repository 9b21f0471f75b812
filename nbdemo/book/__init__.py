"""The Jupyter Book: its assembly and its generated pages."""
