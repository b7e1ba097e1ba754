/* gpuplugin_outer.c - a plugin whose GPU work is done by the library it depends on.
 *
 * outer_main hands its arguments to fakeapp_main in libkairos_test_gpuplugin.so (fakeapp
 * built as a library): loaded with RTLD_DEEPBIND, the dependency is deep-bound too.
 */
int fakeapp_main(int argc, char **argv);
int outer_main(int argc, char **argv);

int outer_main(int argc, char **argv)
{
    return fakeapp_main(argc, argv);
}
