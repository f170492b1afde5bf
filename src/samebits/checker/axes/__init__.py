"""The axes of ``samebits check``: each one controlled variation, everything else held fixed."""
