// The Function App on a Flex Consumption plan: Node.js, a user-assigned managed identity for
// everything (deployment package, host storage, the app's storage, telemetry), and the app
// settings main.bicep assembles. Holds no secret: there is no connection string with a key.

@description('Function App name (also its default host name prefix).')
param name string

param location string
param tags object = {}

@description('Resource id of the Flex Consumption (FC1) plan.')
param appServicePlanId string

@description('Blob endpoint of the account holding the deployment container, e.g. https://<account>.blob.core.windows.net/.')
param deploymentBlobEndpoint string

@description('Container that receives the deployment package (Flex Consumption deploys from blob storage).')
param deploymentContainerName string

@description('Resource id of the user-assigned managed identity.')
param identityId string

@description('Runtime stack: Flex Consumption sets it here, not with FUNCTIONS_WORKER_RUNTIME.')
param runtimeName string = 'node'

@description('Node.js major version.')
param runtimeVersion string = '22'

@description('Memory per instance in MB (Flex Consumption offers 512, 2048 and 4096).')
@allowed([512, 2048, 4096])
param instanceMemoryMB int = 2048

@description('Upper bound on instances the platform scales out to (at most 1000).')
@maxValue(1000)
param maximumInstanceCount int = 100

@description('App settings (name -> value); see main.bicep for what each one is. Secure: JOB_CALLBACK_SECRET may be among them, and a secure parameter stays out of the deployment\'s recorded inputs.')
@secure()
param appSettings object

// Plain resources, no registry module: the properties avm/res/web/site 0.15.1 sent with the
// parameters this file gave it, its defaults included (HTTPS only, client affinity on, public
// network access), so an app it created is updated in place with the same values.
resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  kind: 'functionapp,linux'
  // azd finds the app to deploy the `api` service to by this tag.
  tags: union(tags, { 'azd-service-name': 'api' })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: appServicePlanId
    httpsOnly: true
    clientAffinityEnabled: true
    clientCertEnabled: false
    clientCertMode: 'Optional'
    enabled: true
    hyperV: false
    redundancyMode: 'None'
    publicNetworkAccess: 'Enabled'
    storageAccountRequired: false
    scmSiteAlsoStopped: false
    vnetContentShareEnabled: false
    vnetImagePullEnabled: false
    vnetRouteAllEnabled: false
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${deploymentBlobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: {
        name: runtimeName
        version: runtimeVersion
      }
    }
    siteConfig: {
      alwaysOn: false
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
    }
  }
}

// No publishing user name and password: azd and Core Tools deploy with an Entra ID token, so
// basic authentication on the FTP and SCM (deployment) endpoints only adds a secret that can leak.
resource ftpBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

// The app settings are merged, not replaced: the module writes the app's current settings (read
// here, once the site exists) with these on top, as the registry module did. See docs/deploy.md.
module settings 'siteAppSettings.bicep' = {
  name: '${take(name, 50)}-appsettings'
  params: {
    appName: site.name
    appSettings: appSettings
    currentAppSettings: list('${site.id}/config/appsettings', '2024-04-01').properties
  }
}

@description('Function App name.')
output name string = site.name

@description('Default host name, e.g. <name>.azurewebsites.net.')
output defaultHostname string = site.properties.defaultHostName
