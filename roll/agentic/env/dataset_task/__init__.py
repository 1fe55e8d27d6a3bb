"""Single-turn tasks read from a local data file: ROLL's GEM-registered ``roll_math``, ``roll_qa`` and
``roll_code`` env types, and GEM's own dataset envs (``math:*``, ``qa:*``, ``logic:*``, ``code:*``, ``eval:*``)."""
