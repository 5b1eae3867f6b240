"""The part of RunPod's GraphQL schema the fake serves, and its GPU catalogue.

Type, field and argument names are RunPod's own, so a query the real API accepts for these
operations is accepted here, and one naming anything else fails validation, naming it (graphql-core
answers "Cannot query field 'x' on type 'Pod'."). Prices and stock are illustrative, not live.
"""

from __future__ import annotations

from dataclasses import dataclass

SDL = """
scalar Void

type Query {
  myself: User
  gpuTypes(input: GpuTypeFilter): [GpuType]
  pod(input: PodFilter): Pod
}

type Mutation {
  podFindAndDeployOnDemand(input: PodFindAndDeployOnDemandInput): Pod
  deployCpuPod(input: deployCpuPodInput): Pod
  podTerminate(input: PodTerminateInput): Void
  podStop(input: PodStopInput): Pod
  podResume(input: PodResumeInput): Pod
  updateUserSettings(input: UpdateUserSettingsInput): User
}

enum CloudTypeEnum { ALL SECURE COMMUNITY }

input GpuTypeFilter { id: String }
input PodFilter { podId: String! }
input PodTerminateInput { podId: String! }
input PodStopInput { podId: String!, incrementVersion: Boolean }
input PodResumeInput { podId: String!, gpuCount: Int }
input UpdateUserSettingsInput { pubKey: String }
input GpuLowestPriceInput { gpuCount: Int, secureCloud: Boolean, minMemoryInGb: Int, minVcpuCount: Int }
input EnvironmentVariableInput { key: String!, value: String }

input PodFindAndDeployOnDemandInput {
  name: String
  imageName: String
  gpuTypeId: String
  gpuCount: Int
  cloudType: CloudTypeEnum
  supportPublicIp: Boolean
  startSsh: Boolean
  startJupyter: Boolean
  dataCenterId: String
  countryCode: String
  volumeInGb: Int
  containerDiskInGb: Int
  minVcpuCount: Int
  minMemoryInGb: Int
  dockerArgs: String
  ports: String
  volumeMountPath: String
  env: [EnvironmentVariableInput]
  templateId: String
  networkVolumeId: String
  allowedCudaVersions: [String]
  minDownload: Int
  minUpload: Int
}

input deployCpuPodInput {
  name: String
  imageName: String
  instanceId: String
  cloudType: CloudTypeEnum
  startSsh: Boolean
  dataCenterId: String
  countryCode: String
  containerDiskInGb: Int
  dockerArgs: String
  ports: String
  volumeMountPath: String
  env: [EnvironmentVariableInput]
  templateId: String
  networkVolumeId: String
  minDownload: Int
  minUpload: Int
}

type User {
  id: String
  email: String
  pubKey: String
  clientBalance: Float
  currentSpendPerHr: Float
  pods: [Pod]
  networkVolumes: [NetworkVolume]
}

type NetworkVolume { id: String, name: String, size: Int, dataCenterId: String }

type GpuType {
  id: String
  displayName: String
  manufacturer: String
  memoryInGb: Int
  cudaCores: Int
  maxGpuCount: Int
  secureCloud: Boolean
  communityCloud: Boolean
  securePrice: Float
  communityPrice: Float
  secureSpotPrice: Float
  communitySpotPrice: Float
  oneWeekPrice: Float
  oneMonthPrice: Float
  threeMonthPrice: Float
  lowestPrice(input: GpuLowestPriceInput): LowestPrice
}

type LowestPrice {
  gpuName: String
  gpuTypeId: String
  minimumBidPrice: Float
  uninterruptablePrice: Float
  stockStatus: String
  maxUnreservedGpuCount: Int
  availableGpuCounts: [Int]
}

type Pod {
  id: String
  name: String
  imageName: String
  env: [String]
  machineId: String
  machine: Machine
  desiredStatus: String
  lastStatusChange: String
  costPerHr: Float
  adjustedCostPerHr: Float
  gpuCount: Int
  vcpuCount: Float
  memoryInGb: Float
  containerDiskInGb: Int
  volumeInGb: Float
  volumeMountPath: String
  networkVolumeId: String
  dockerArgs: String
  dockerId: String
  podType: String
  port: Int
  ports: String
  uptimeSeconds: Int
  runtime: PodRuntime
}

type Machine { podHostId: String, gpuDisplayName: String, gpuTypeId: String }

type PodRuntime {
  uptimeInSeconds: Int
  ports: [PodRuntimePorts]
  gpus: [PodRuntimeGpus]
  container: PodRuntimeContainer
}

type PodRuntimePorts { ip: String, isIpPublic: Boolean, privatePort: Int, publicPort: Int, type: String }
type PodRuntimeGpus { id: String, gpuUtilPercent: Int, memoryUtilPercent: Int }
type PodRuntimeContainer { cpuPercent: Int, memoryPercent: Int }
"""


@dataclass
class GpuType:
    """One GPU type of the catalogue; ``stock`` is how many GPUs of it pods may hold at once."""

    id: str
    display_name: str
    memory_in_gb: int
    secure_price: float | None
    community_price: float | None
    stock: int = 8
    max_gpu_count: int = 8
    manufacturer: str = "Nvidia"

    def price(self, cloud_type: str = "ALL") -> float | None:
        """The hourly price of one GPU in ``cloud_type`` (ALL: the cheaper), None where not offered."""
        offered = {"SECURE": [self.secure_price], "COMMUNITY": [self.community_price]}.get(
            cloud_type, [self.secure_price, self.community_price]
        )
        prices = [p for p in offered if p is not None]
        return min(prices) if prices else None


#: RunPod's ids and display names; the A5000 is out of stock, to test "unavailable".
GPU_TYPES: tuple[GpuType, ...] = (
    GpuType("NVIDIA H200", "H200 SXM", 141, 3.99, 3.59),
    GpuType("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, 2.69),
    GpuType("NVIDIA H100 PCIe", "H100 PCIe", 80, 2.39, 1.99),
    GpuType("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 1.89, 1.39),
    GpuType("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.64, 1.19),
    GpuType("NVIDIA L40S", "L40S", 48, 0.86, 0.79),
    GpuType("NVIDIA RTX A6000", "RTX A6000", 48, 0.49, 0.33),
    GpuType("NVIDIA A40", "A40", 48, 0.40, 0.35),
    GpuType("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.34),
    GpuType("NVIDIA L4", "L4", 24, 0.43, None),
    GpuType("NVIDIA RTX A5000", "RTX A5000", 24, 0.27, 0.16, stock=0),
)

#: CPU instance ids (``deployCpuPod``'s ``instanceId``) and their hourly prices.
CPU_INSTANCES: dict[str, float] = {"cpu3c-2-4": 0.06, "cpu3g-4-16": 0.16, "cpu5c-8-16": 0.40}
#: The instance a CPU pod gets when none is named.
DEFAULT_CPU_INSTANCE = "cpu3c-2-4"
