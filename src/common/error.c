/*
 * error.c - lookups generated from AD_ERRNO_MAP; nothing here is written by hand per code.
 */
#include "common/error.h"

static const struct {
    const char *code;
    int status;
    const char *title;
} table[] = {
#define AD_ERR_ROW(e, code, status, title) {code, status, title},
    AD_ERRNO_MAP(AD_ERR_ROW)
#undef AD_ERR_ROW
};

const char *ad_err_code(ad_err e)
{
    return e < AD_E__COUNT ? table[e].code : "internal";
}

int ad_err_status(ad_err e)
{
    return e < AD_E__COUNT ? table[e].status : 500;
}

const char *ad_err_title(ad_err e)
{
    return e < AD_E__COUNT ? table[e].title : "Internal error";
}
