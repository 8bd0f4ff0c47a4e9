/* tilekit CLI - placeholder until the lab lands (bench|verify|info). */
#include <stdio.h>
#include "tilekit.h"
int main(void)
{
    fprintf(stderr, "tilekit: the lab commands are not built yet\n");
    return 2;
}
