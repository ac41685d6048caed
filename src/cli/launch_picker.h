/*
 * The model `corral launch TOOL` runs the tool on when no --model is given: a numbered list
 * of the server's models, then the recommended ones it lacks, and one chosen on the terminal
 * by number or by name, the model last launched with the tool as the default. The streams
 * are parameters, so that tests drive it with in-memory ones.
 */
#ifndef CORRAL_CLI_LAUNCH_PICKER_H
#define CORRAL_CLI_LAUNCH_PICKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "corral/error.h"

#define LAUNCH_PICK_MAX_NAME 256 /* the longest name the picker reads */

/*
 * Write the choices to out and read answers from in until one names a model: a number from
 * the list, a name (any: the server is asked about it afterwards), or an empty line for
 * last_used when the server has it (last_used may be NULL). The name into chosen. false with
 * err at the end of in, or when the name does not fit chosen_size.
 */
bool launch_pick_model(FILE *in, FILE *out, const char *tool_display_name,
                       const char *const *local, size_t n_local, const char *last_used,
                       char *chosen, size_t chosen_size, corral_error *err);

#endif
