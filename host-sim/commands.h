/* commands.h - sdt-host's subcommands; each returns an exit status (exit_codes.h). argv[0] is
 * the subcommand's name, as GOptionContext expects a program name there. */
#ifndef SDT_HOST_COMMANDS_H
#define SDT_HOST_COMMANDS_H

int cmd_demo(int argc, char **argv);
int cmd_create_embedding(int argc, char **argv);
int cmd_create_hypernetwork(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* serve/serve_command.c, with libsoup 3 */

#endif
