"""Local training engines: all users of a silo at once (:mod:`.per_user`) and per-silo DP-SGD (:mod:`.dpsgd`)."""
