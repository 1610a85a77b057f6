from ostwick.layout import paginate


def test_paginate_keeps_every_stop():
    assert sum(len(p) for p in paginate([str(i) for i in range(100)])) == 100
