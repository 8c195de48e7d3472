"""CDI (Container Device Interface) specs written by the daemon, and Allocate answers that name them.

``names`` says what a unit is called in a spec, ``spec`` turns backends' ContainerEdits into a spec
document (pure), ``files`` owns the spec files in the CDI directory (atomic writes, nothing of another
tool touched), ``publisher`` rebuilds the files when the inventory changes, and ``delivery`` shapes an
Allocate answer for a pool's ``deviceDelivery``. Nothing here knows a vendor: a backend may name its
device class (``cdi_class``) and say what a spec entry holds (``cdi_edits``), see backend.py.
"""
