"""strom's plugin system: pluggy hookspecs, the plugin manager and the built-in plugins.

strom is extended the way pytest is: with `pluggy <https://pluggy.readthedocs.io>`_, project
name ``strom``. Extension points (one hookspec module each, in :mod:`strom.plugins.hookspecs`):

================================  ============================================  ==================================
hook                              returns                                       selected by config key
================================  ============================================  ==================================
``strom_authorizers()``           ``{name: factory(config) -> Authorizer}``     ``authorizer.class.name``
``strom_quota_managers()``        ``{name: factory(config) -> QuotaManager}``   ``client.quota.callback.class``
``strom_assignors()``             ``[ConsumerGroupPartitionAssignor, ...]``     ``group.consumer.assignors``
``strom_remote_storage_managers`` ``{name: factory(config) -> RSM}``            ``remote.log.storage.manager.class.name``
``strom_remote_log_metadata_``    ``{name: factory(config) -> RLMM}``           ``remote.log.metadata.manager.class.name``
``managers()``
``strom_local_tiers()``           ``{name: factory(config) -> LocalTier}``      ``strom.local.tier``
================================  ============================================  ==================================

Every plugin offers implementations *by name*; the broker config picks one by that name, and an
unknown name is a start-up error that lists the names installed. Defaults (``allow-all``,
``unlimited``, ``uniform,range``, ``local``, ``topic-based``; and ``s3`` when a remote tier is
named) are built-in plugins (:mod:`strom.plugins.builtin`)
registered exactly like third-party ones. Hooks are called once at broker start-up; the request
path calls the returned objects directly.

Writing a plugin
----------------
1. A module with functions marked by :data:`strom.plugins.markers.hookimpl` (pluggy ignores
   everything else in it)::

       # my_strom_plugin/__init__.py
       from strom.plugins.hookspecs.authorizers import Action, AuthorizationResult, RequestContext
       from strom.plugins.markers import hookimpl

       class ReadOnly:
           def __init__(self, config):            # the broker's properties, Kafka names
               self.admins = set(config.get("my.admins", "").split(","))

           def authorize(self, ctx: RequestContext, actions: list[Action]) -> list[AuthorizationResult]:
               return [AuthorizationResult.ALLOWED if ctx.principal in self.admins
                       or a.operation.name in ("READ", "DESCRIBE") else AuthorizationResult.DENIED
                       for a in actions]

       @hookimpl
       def strom_authorizers():
           return {"my_strom_plugin.ReadOnly": ReadOnly}

2. Declare it in the ``strom.plugins`` entry-point group of your package::

       [project.entry-points."strom.plugins"]
       my_strom_plugin = "my_strom_plugin"

3. ``pip install`` it and set ``authorizer.class.name=my_strom_plugin.ReadOnly``.

Loading (:func:`strom.plugins.manager.get_plugin_manager`): built-ins, then the entry points of
``strom.plugins``, then modules named in ``STROM_PLUGINS`` (comma-separated), then
``check_pending()`` (a misspelled hook name is an error). ``STROM_DISABLE_PLUGIN_AUTOLOAD=1``
skips the entry points (then only ``STROM_PLUGINS`` adds plugins); the config key
``strom.plugins.blocklist`` names plugins (entry-point names, or the built-ins' names such as
``allow_all``) never to register. ``tests/data/strom_test_plugin`` is a complete example.
"""
