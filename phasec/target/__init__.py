"""The compilation target: CPU features, vector lanes and every schedule's
tuning knobs, in one place (see :mod:`phasec.target.tuning`)."""
