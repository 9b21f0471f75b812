"""The claims: their registry, and the verdict API that every notebook ends with."""
