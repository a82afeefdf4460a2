"""Not the package: this is the repository's root folder. The package is ``agentgspo/`` inside it.

Python imports a folder named ``agentgspo`` on ``sys.path`` as the package ``agentgspo``. A script run from the
folder that holds a clone named ``agentgspo`` finds the clone first, and without this file it became an empty
namespace package (``module 'agentgspo' has no attribute 'ChatEnv'``). This file makes that import the real
package: the inner ``agentgspo/`` folder, with ``envs/``, ``sandboxes/`` and ``recipes/`` beside it as the
installed distribution maps them (``agentgspo.envs`` and so on).
"""

import os as _os

_root = _os.path.dirname(_os.path.abspath(__file__))
__path__ = [_os.path.join(_root, "agentgspo"), _root]  # agentgspo.X: agentgspo/X first, then envs/, sandboxes/, ...
__file__ = _os.path.join(_root, "agentgspo", "__init__.py")
with open(__file__, encoding="utf-8") as _source:
    _code = compile(_source.read(), __file__, "exec")
del _os, _root, _source
exec(_code)  # the package's own __init__, in this module's namespace
del _code
