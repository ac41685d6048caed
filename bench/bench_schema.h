/*
 * The JSON schema the structured-output benches use: strings, numbers, an array, a nested
 * object with an optional property, an enum; as a `format` request would send it.
 */
#ifndef CORRAL_BENCH_SCHEMA_H
#define CORRAL_BENCH_SCHEMA_H

static const char bench_schema_text[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\"},"
    "\"score\":{\"type\":\"number\"},"
    "\"active\":{\"type\":\"boolean\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"address\":{\"type\":\"object\",\"properties\":{"
    "\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\"}},\"required\":[\"street\",\"city\"]},"
    "\"status\":{\"enum\":[\"new\",\"active\",\"retired\"]}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"address\",\"status\"]}";

#endif
