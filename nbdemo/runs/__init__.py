"""Running and judging claims: parameters, fingerprints, the runner, sweeps, the results store and the evidence rules."""
