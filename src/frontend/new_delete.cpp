// TEMPORARY STUB (see c_api.cpp).
