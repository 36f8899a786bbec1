"""``uldp deploy``: a federation on Flower's SuperLink and SuperNodes, run from a settings file.

- :mod:`uldp.deploy.config`: :class:`~uldp.deploy.config.DeployConfig`, a built-in dataset's settings file.
- :mod:`uldp.deploy.app`: the uldp ServerApp and ClientApp (:class:`uldp.flower.UldpStrategy` and the silo ClientApp)
  driven by the settings file: a built-in dataset's run configuration, or a hospital's own table.
- :mod:`uldp.deploy.superlink`: the processes: a SuperLink running that app (server), a SuperNode with its ClientApp
  in the same process (silo), and the silo's node config from its settings.
- :mod:`uldp.deploy.credentials`: the silos' relay key and the SuperNodes' authentication keys.
- :mod:`uldp.deploy.cli`: ``uldp deploy server|silo|keys``.

There is one Flower runtime: the earlier one, on Flower's deprecated start_server/start_client, is gone (its options
are refused naming their replacement, :data:`uldp.deploy.cli.RETIRED`).
"""
