"""The shared ML parts every paper uses: datasets and their check, models, the training loop and vectorised ensembles."""
