/* commands.h -- the subcommands of the `loom` command line, one file each (tools/cmd-*.c). */
#ifndef LOOM_TOOLS_COMMANDS_H
#define LOOM_TOOLS_COMMANDS_H

/* Each takes the arguments after the subcommand name (argv[0] is the subcommand) and returns
 * the process exit status: 0 on success, 1 on any error (after one clear message on stderr). */
int loom_cmd_run(int argc, char ** argv);
int loom_cmd_info(int argc, char ** argv);
int loom_cmd_tokenize(int argc, char ** argv);
int loom_cmd_convert_llama2c(int argc, char ** argv);
int loom_cmd_test_ops(int argc, char ** argv);
int loom_cmd_bench(int argc, char ** argv);
int loom_cmd_gen_model(int argc, char ** argv);
int loom_cmd_chat(int argc, char ** argv);
int loom_cmd_perplexity(int argc, char ** argv);
int loom_cmd_quantize(int argc, char ** argv);
int loom_cmd_serve(int argc, char ** argv);

#endif
