"""Running a model under control: traces, batch probes, child processes. Shared by check,
doctor, the Predictor and goldens."""
