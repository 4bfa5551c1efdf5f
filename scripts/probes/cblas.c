/* Build probe: OpenBLAS's CBLAS links and computes. */
#include <cblas.h>
int main(void)
{
    double a = 1, b = 1, c = 0;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0, &a, 1, &b, 1, 0.0, &c, 1);
    return (int)c - 1;
}
