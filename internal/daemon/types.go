package daemon

import "github.com/emmansun/gmsm/smx509"

type smxCertificate = smx509.Certificate
