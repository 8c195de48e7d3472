"""What the fake vendor libraries share: a C JSON reader and compile-once-by-hash building.

The fakes (``vendors/nvidia/fake``, ``vendors/ascend/fake``) are C shared objects with the real ABI,
compiled at test set-up with the machine's compiler. Both read JSON node and control files
(``fake_json.h``) and both must be built exactly once per source version, safely from several
processes (:func:`build_shared_library`).
"""

from vendors.fakelib.build import FakeBuildError, FakeLibrary, build_shared_library

__all__ = ["FakeBuildError", "FakeLibrary", "build_shared_library"]
