"""Each paper's own code, one folder per paper: its experiments, models, metrics and theory."""
