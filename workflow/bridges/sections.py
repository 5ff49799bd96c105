"""Bridge sections: the ``[bridges.NAME]`` sections every bridge declares, registered in one tuple.

The composition root (``cli.base``, the ops that build an ``App``) passes ``SECTIONS`` to
``App.load``/``load_config``; core reads ``[bridges.NAME]`` against them and names no bridge.
A new bridge adds its ``settings.SECTION`` here.
"""

from workflow.bridges.gmail import settings as gmail
from workflow.bridges.slack import settings as slack
from workflow.core.schema import Plugin

SECTIONS: tuple[Plugin, ...] = (gmail.SECTION, slack.SECTION)
