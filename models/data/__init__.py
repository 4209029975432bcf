"""Training data for Clef-flash: a reproducible generator, held out by source, and readers
for the gateway's own decision log and for combined-format access logs."""
