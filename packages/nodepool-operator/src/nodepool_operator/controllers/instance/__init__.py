from nodepool_operator.controllers.instance._old import *  # noqa
from nodepool_operator.controllers.instance._old import FINALIZER, NAME, UID_TAG, InstanceController
